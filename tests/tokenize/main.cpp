#define BOOST_TEST_MODULE tokenize
#include <boost/test/unit_test.hpp>
