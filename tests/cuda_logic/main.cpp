#define BOOST_TEST_MODULE cuda_logic
#include <boost/test/unit_test.hpp>
